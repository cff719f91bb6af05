"""One module per subcommand; each exposes ``register(subparsers)`` and sets ``func``."""

# Order is the order `reprobot --help` lists them in: the pipeline's order.
NAMES = ["reduce", "env", "versions", "contrast", "route", "index", "dedup", "draft", "file", "watch", "action"]
