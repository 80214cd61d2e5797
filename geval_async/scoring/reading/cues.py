"""The words around a number that tell whether it is a judge's rating: cues, hedges, counts.

Regular expressions only, used by :mod:`geval_async.scoring.reading.verdicts`: the number shapes
judges write, the cues that mark a verdict ("Final score", "Rating:", "I'd give it"), the
words that make a mention hypothetical ("a perfect score of 5", "not a 5", "would mean"), the
words that may follow a rating (any other word makes the number a count: "15 penalties"), and
the phrases of a refusal.
"""

from __future__ import annotations

import re

WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
NUM = r"(?:\d+(?:\.\d+)?|\.\d+|" + "|".join(WORDS) + r")"
# A number not glued to a word or another number ("GPT-4", "4th", "v2", "3-year-old").
CANDIDATE = re.compile(
    rf"(?<![A-Za-z0-9_.])(?<![A-Za-z]-)(?P<sign>-(?=\d))?(?P<num>{NUM})"
    rf"(?:\s*(?:/|\bout\s+of\b)\s*(?P<den>{NUM})(?![\d.]*\d))?"
    rf"(?P<star>[\s-]*stars?\b)?"
    r"(?![A-Za-z0-9_]|\.\d|-[A-Za-z])",
    re.IGNORECASE,
)
RANGE = re.compile(
    rf"(?<![\w.])({NUM})\s*(?:-|–|—|\bor\b(?:\s+an?\b)?)\s*({NUM})(?![\w.]*\d)", re.I
)
BETWEEN = re.compile(rf"\bbetween\s+(?:an?\s+)?({NUM})\s+and\s+(?:an?\s+)?({NUM})\b", re.I)
BRACKETS = re.compile(r"\[\[\s*([^\[\]\n]{1,40}?)\s*\]\]")
# An explicit verdict mark that closes the answer: "Rating: [[8]]", '"Rating: [[9]]".',
# "**[[7]]**", with only closing quotes, markup and a full stop after it.
CLOSING_MARK = re.compile(r"\[\[\s*([^\[\]\n]{1,40}?)\s*\]\][\s*_`'\"“”‘’»).!]*\Z")
# A mark's content that names a value on the scale's terms: "8", "7.5", "eight", "4/5".
MARK_VALUE = re.compile(rf"({NUM})(?:\s*(?:/|\bout\s+of\b)\s*({NUM}))?", re.IGNORECASE)
RESULT = re.compile(r"\[RESULT\]\s*([^\s\]]{1,40})", re.IGNORECASE)
STAR_GLYPHS = re.compile(r"[★⭐]+[☆]*")

FINAL_CUE = re.compile(
    r"\b(?:final|overall|in\s+conclusion|in\s+summary|to\s+sum\s+up|verdict)\b", re.IGNORECASE
)
LABEL_CUE = re.compile(
    r"\b(?:scor(?:e|es|ed|ing)|rat(?:e|es|ed|ing)|grad(?:e|ed|ing)|assessment|evaluation|"
    r"answer|result|mark|give|giving|gave|assign|assigning|award|awarding|deserves?|earns?|"
    r"merits?|receives?|gets?|warrants?|choose|choice|select|pick|option)\b"
    r"|\bi(?:'d|\s+would)\s+say\b|\b(?:is|it's|was|as)\s+an?\b",
    re.IGNORECASE,
)
# What may stand between a cue and its number: punctuation, blanked text and filler words.
GAP_PUNCT = r"[\s:=_'\"()\[\]{}<>|~\-–—,]*"
GAP_WORDS = (
    r"is|of|be|would|will|it|this|that|a|an|as|at|my|the|final|overall|i|i'd|i'll|give|given|"
    r"rate|rated|rating|ratings|score|scored|scores|assign|award|summary|response|answer|text|"
    r"translation|story|reply|output|gets?|receives?|deserves?|earns?|for|to|me|its|on|with|"
    r"solid|strong|clear|total|so|hence|thus|therefore|then|we|should|can|here|verdict|"
    r"evaluation|assessment|grade|mark|marks|result|coherence|fluency|relevance|consistency|"
    r"quality|overall|conclusion|summary's|article|be|being|just|only|around|about|roughly|"
    r"solidly|firmly|comfortably|confidently|honestly|fairly|probably|likely|say|said|think|"
    r"option|choice|select|choose|pick|go|goes|falls|lands|sits|stands|comes|settle|settles|"
    r"in|terms|category|criterion|level|range|band|place|put|places|puts"
)
GAP = re.compile(rf"{GAP_PUNCT}(?:(?:{GAP_WORDS})\b{GAP_PUNCT}){{0,7}}", re.IGNORECASE)

# Before a number, within its clause: it is hypothetical, compared or negated.
HYPOTHETICAL_BEFORE = re.compile(
    r"\b(?:(?:perfect|full|maximum|max|highest|top|lowest|minimum|ideal|best|worst)\s+"
    r"(?:score|rating|mark|marks|grade|possible)|ideal|higher|lower|better|worse|"
    r"rather\s+than|instead\s+of|not|never|than|short\s+of|reach|reaching|achieve|even|if|"
    r"unless|whereas|compared\s+to|versus|vs|like|such\s+as|e\.g|for\s+example|for\s+instance|"
    r"might|could|would\s+have|could\s+have|should\s+have|almost|nearly|"
    r"close\s+to|previous|earlier|another|other|from|nor|neither|no|without|expected|typical|typically|"
    r"usually|reserve|reserved|between|either)\b|n't\b",
    re.IGNORECASE,
)
# Before a number, within its clause: a figure of the graded task ("the reference answer is 3")
# or of the graded answer ("the assistant answers 1", "the function returns 5"): a judge grading
# an assistant cites both, and neither is its verdict.
CITED_FIGURE = re.compile(
    r"\b(?:(?:reference|correct|right|expected|true|exact)\s+(?:answer|result|value|solution)|"
    r"(?:assistant|model|chatbot|code|function|program|query|script)(?:'s\s+\w+)?\s+"
    r"(?:answers|answered|says|said|writes|wrote|states|stated|claims|claimed|returns|returned|"
    r"computes|computed|calculates|calculated|outputs|prints|printed|reports|reported|counts|"
    r"counted|lists|listed))\b",
    re.IGNORECASE,
)
# A sentence that opens with these concludes the answer: its labelled rating is the verdict.
CONCLUSION = re.compile(
    r"\b(?:therefore|thus|hence|consequently|accordingly|based\s+on\s+(?:this|these|that|the\s+"
    r"above|all|my)|in\s+light\s+of|taking\s+(?:everything|all|these|this)|all\s+things\s+"
    r"considered|considering\s+(?:all|everything|these|this|the\s+above)|all\s+in\s+all|"
    r"on\s+balance|given\s+(?:all|these|this|the\s+above))\b",
    re.IGNORECASE,
)
CLAUSE_END = re.compile(
    r"[.;:!?\n—]|,\s|\s-\s|\b(?:but|so|and|therefore|thus|hence|however)\b", re.IGNORECASE
)
SENTENCE_END = re.compile(r"[.!?\n]\s")
# A conditional sentence ("If it had the date, it would be a 5") rates nothing; "if I had to
# rate it, ..." frames a verdict.
CONDITIONAL = re.compile(r"\bif\b(?!\s+(?:i|i'm|forced|pressed|asked|required)\b)", re.I)
CONTRAST = re.compile(r"\b(?:but|however|yet|instead|as\s+it\s+stands|as\s+is)\b", re.I)
OR = re.compile(r"\bor\W*(?:an?\s+)?$", re.IGNORECASE)
HEDGE_BEFORE = re.compile(r"\b(?:maybe|perhaps|possibly|or)\W*(?:an?\s+)?$", re.IGNORECASE)
# After a number: it defines a point of the scale, or is conditional.
HYPOTHETICAL_AFTER = re.compile(
    r"[ \t]*(?:\([^)]{0,30}\)[ \t]*)?(?:(?:would|could|might|will|should|can)\s+)?(?:mean|means|"
    r"meant|"
    r"indicate|indicates|represent|represents|require|requires|imply|implies|signif(?:y|ies)|"
    r"denote|denotes|correspond|corresponds|reserved|is\s+reserved|are\s+reserved|is\s+for|"
    r"is\s+given|be\s+given|be\s+reserved|be\s+for|apply|applies|need|needs|is\s+meant|"
    r"if|when|unless|=|is\s+(?:the\s+)?(?:highest|lowest|best|worst|maximum|minimum|top))\b"
    r"|[ \t]*="
    # "a 2 would be too harsh", "a 4 too generous": a rating weighed and set aside.
    r"|(?:[ \t]+(?:would|will|might|could)\s+be|[ \t]+(?:is|feels|seems|looks))?[ \t]+too\b",
    re.IGNORECASE,
)
# Words that may follow a rating; any other lowercase word makes the number a count.
_FOLLOWER_WORDS = """
    out of on in for because as since due given and but or which with is was the this that
    overall stars star to from at by so it its i would should seems reflects reflecting
    indicating meaning while though although even however based considering here there are
    be being has have rating score grade here's it's points point marks mark per across
    regarding whereas my we you they all both either more most will than then now too when
    where if not only just considering due thanks owing reflecting given while pts mostly
    also out rather mainly primarily largely simply really instead today ultimately
    accordingly"""
FOLLOWERS = frozenset(_FOLLOWER_WORDS.split())
UNITS = {"points", "point", "marks", "mark", "pts"}
FOLLOWING_WORD = re.compile(r"[ \t]+([a-z][a-z'-]*)")
# "2 of its 3 sentences", "3 of the 4 points": a share of things counted, never a rating.
SHARE_OF = re.compile(
    r"[ \t]+of[ \t]+(?:the|its|their|his|her|these|those|them|all|our|your|which)\b", re.I
)

REFUSAL = re.compile(
    r"\b(?:i\s+(?:cannot|can\s*not|can't|am\s+unable|won't|will\s+not|must\s+decline|"
    r"do\s+not\s+feel|don't\s+feel|am\s+not\s+able)|i'm\s+(?:unable|not\s+able|sorry)|"
    r"unable\s+to\s+(?:rate|score|evaluate|assess|provide|determine|give)|i\s+am\s+sorry|"
    r"as\s+an\s+ai|i\s+apologi[sz]e|not\s+applicable|n/a|cannot\s+be\s+(?:rated|scored|evaluated|"
    r"assessed)|no\s+(?:summary|text|document|article|response)\s+(?:was\s+|is\s+)?provided|"
    r"(?:summary|text|response)\s+is\s+(?:missing|empty))",
    re.IGNORECASE,
)
