"""The GitHub Action: event, extract, reproduce, result, render, publish."""
