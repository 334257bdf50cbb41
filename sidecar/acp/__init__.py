"""The ACP edge: the stdio JSON-RPC server, the method handlers, `initialize`, and the
translation of domain events and transcripts into ACP notifications. The only place
ACP shapes are built.
"""
