"""One answer to one rating: where in a judge's text the rating is, and why an answer has none."""
