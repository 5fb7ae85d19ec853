"""The Gradio app, one module a job; app.py (beside this package) builds the page and launches it."""
