"""The app's one engine thread (nothing here imports gradio or the model).

One long-lived thread does all torch work of the app: loading the model and every decode. Each
Python thread that calls torch gets its own OpenMP team, and measured on 2 cores a decode in a fresh
thread ran ~20% slower than in a thread whose team already exists (docs/app.md, "Older numbers")."""
from concurrent.futures import ThreadPoolExecutor

ENGINE_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eagle-engine")
