"""reprobot's user-facing side: the CLI, environment capture, routing, dedup, drafts, filing, the Action."""
