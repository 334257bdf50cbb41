"""The agent: one turn's loop, the providers it asks and the tools it runs."""
