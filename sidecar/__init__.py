"""The sidecar: owns every agent session and serves ACP JSON-RPC on stdio."""
