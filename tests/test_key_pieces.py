"""The keys a rerun makes from a template's and its records' escaped pieces are the keys of
the texts those pieces make (:meth:`~geval_async.study.keys.KeyFrame.keys_filled`): a key that
differed would send again what the cache holds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from geval_async.study.keys import KeyFrame, escaped

# Text with what JSON escapes (quotes, backslashes, control characters) and what it does not.
_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"]) | st.sampled_from('"\\\n\t\x00\x1f'),
    max_size=20,
)
_BODY = {"model": "judge", "messages": [{"role": "user", "content": "x"}], "n": 2}


@given(
    st.integers(1, 3).flatmap(
        lambda slots: st.tuples(
            st.lists(_TEXT, min_size=slots + 1, max_size=slots + 1),
            st.lists(st.lists(_TEXT, min_size=3, max_size=3), min_size=slots, max_size=slots),
        )
    )
)
def test_keys_from_escaped_pieces_are_the_keys_of_the_texts(
    case: tuple[list[str], list[list[str]]],
) -> None:
    literals, columns = case
    frame = KeyFrame.around(_BODY, 0)
    assert frame is not None
    texts = [
        "".join(piece for pair in zip(literals, [*row, ""], strict=True) for piece in pair)
        for row in zip(*columns, strict=True)
    ]
    escaped_columns = [[escaped(value) for value in column] for column in columns]
    assert frame.keys_filled(literals, escaped_columns) == [frame.key(text) for text in texts]
