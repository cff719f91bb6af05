"""The GitHub client moved to bot/github_api.py (the core layer), so that bot/upstream and
bot/issue no longer lean on each other for it. This name stays for the drivers, commands and
tests that still import it from here; new code imports bot.github_api."""
from bot.github_api import *  # noqa: F401,F403
from bot.github_api import __all__  # noqa: F401
