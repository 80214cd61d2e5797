"""The cache folder: answers stored by their keys, the claims on requests in flight, and reading
them back."""
