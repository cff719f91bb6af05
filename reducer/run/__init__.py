"""Running candidates: starting the user's interpreter (cold, or forked from a warm image), its
children and launcher ranks, the limits and GPUs each run gets, and watching what it raised.

The search (reducer/search/judge.py, scheduler.py, loop.py) knows only ``slots.Slots``; everything that
starts, feeds or stops a process lives here. zygote_server.py, zygote_children.py, zygote_exit.py
and exception_hook/ run inside the USER's interpreter and are loaded there by path (stdlib only).
"""
