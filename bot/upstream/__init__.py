"""What upstream knows: routing, the issue index, dedup."""
