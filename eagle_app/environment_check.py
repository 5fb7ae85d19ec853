"""A bad environment variable at start: say which, with what it allows, and do nothing else.

Checked before anything of the app is imported (several modules read their variable at import), so
that `EAGLE_APP_RUN_BUDGET_S=abc python app.py` is one line on the console and not a traceback. Run as
`python app.py` (a Space), the app then serves a page that shows the same lines instead of itself, so
that whoever opens it reads why; imported (`import app`, the tests), it stops with exit code 2.
"""
from __future__ import annotations

import html
import sys

from eagle_core.environment import problems

HINT = "Fix the variable (or unset it) and start the app again; docs/app.md lists every variable."


def stop_on_bad_settings(serve: bool) -> None:
    """Nothing when every variable is good; else print each bad one's line to stderr, then serve the
    page that shows them (`serve`, never returns) or exit with code 2."""
    lines = problems()
    if not lines:
        return
    for line in lines:
        print(f"error: {line}", file=sys.stderr, flush=True)
    if not serve:
        raise SystemExit(2)
    serve_message(lines)
    raise SystemExit(2)


def message_markdown(lines: list[str]) -> str:
    items = "\n".join(f"- <code>{html.escape(line)}</code>" for line in lines)
    return f"## The app cannot start: a setting is wrong\n\n{items}\n\n{HINT}"


def serve_message(lines: list[str]) -> None:
    import gradio as gr  # noqa: PLC0415  (only when a setting is bad)

    with gr.Blocks(title="EAGLE: a setting is wrong") as page:
        gr.Markdown(message_markdown(lines))
    page.launch()
