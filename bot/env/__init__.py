"""The environment a failure happened in: probe, system info, lockfile, check."""
