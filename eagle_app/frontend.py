"""A script the app's page must run before Gradio's own: it slows Gradio's status-tracker timers.

Why. Gradio's status tracker (frontend chunk `statustracker-*.js`, Gradio 6.31) counts the
"elapsed" seconds of a pending event with a requestAnimationFrame loop, 60 times a second, and
one such loop runs even on an idle page (a page holding a single gr.Button, and this app's page).
During a run every output's tracker is pending, so each runs its own loop. A two-thread decode
waits for its slower thread at every parallel region, so a browser waking up 60 times a second on
the same 2-core machine costs it far more than the browser's own CPU time: a CLI decode beside the
idle page lost tokens/s (docs/app.md, "After the animation-frame fix"). That is the page's timing
not telling the truth (issue 11).

What. The script wraps `window.requestAnimationFrame`: a frame requested from the status
tracker's code runs after TRACKER_FRAME_MS instead of at the next frame, every other caller is
untouched (plotly, Svelte transitions). The tracker's elapsed-time label (hidden in this app
during timed runs anyway) then advances once a second instead of 60 times. With it the idle page
costs Chromium a few percent of a core, and a CLI decode beside it runs about as fast as beside
about:blank (the same section of docs/app.md).

How it runs first. The tracker keeps its own reference to requestAnimationFrame from the
moment its module loads, before Gradio inserts `launch(head=...)` into the page, so `head=`
is too late (measured: no change). `EarlyScript` is an ASGI middleware that puts the script at
the top of the page's <head>, before Gradio's module script. If a future Gradio renames the
chunk, the wrapper finds no tracker frames and changes nothing; the browser test
(tests/test_browser.py) checks the frame rate of the idle page, so that would show.
"""
from __future__ import annotations

TRACKER_FRAME_MS = 1000

EARLY_SCRIPT = """<script data-eagle-explainer="tracker-frames">(() => {
  const raf = window.requestAnimationFrame.bind(window);
  const counts = window.__egFrames = {tracker: 0, other: 0};
  window.requestAnimationFrame = (cb) => {
    if (String(new Error().stack).includes("statustracker")) {
      counts.tracker++;
      return setTimeout(() => cb(performance.now()), %d);
    }
    counts.other++;
    return raf(cb);
  };
})();</script>""" % TRACKER_FRAME_MS


class EarlyScript:
    """ASGI middleware: GET / (the page) gets EARLY_SCRIPT right after its <head> tag."""

    def __init__(self, app, script: str = EARLY_SCRIPT):
        self.app, self.script = app, script.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET" or scope.get("path") not in ("/", ""):
            await self.app(scope, receive, send)
            return
        start, parts = {}, []

        async def rewrite(message):
            if message["type"] == "http.response.start":
                start.update(message)
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            parts.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(parts)
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            kind = dict((k.lower(), v) for k, v in headers).get(b"content-type", b"")
            if b"text/html" in kind and b"<head>" in body:
                body = body.replace(b"<head>", b"<head>" + self.script, 1)
            await send({**start, "headers": headers + [(b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, rewrite)
