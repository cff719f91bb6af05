"""The issue itself: forms, drafts, filing, the GitHub client."""
