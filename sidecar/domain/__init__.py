"""The domain: records and their one transition table, transcript entries, events, errors.

Pure values and rules: no I/O, no wire vocabulary, no asyncio. Every store applies the
record changes defined here, so fencing and lease rules are written once.
"""
