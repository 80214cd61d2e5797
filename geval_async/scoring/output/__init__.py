"""The scoring stage's outputs: the files, the Markdown report, the plots and the HTML view."""
