"""The app's callbacks that are not views: decoding (Generate / Step / Stop) and the page's own events."""
