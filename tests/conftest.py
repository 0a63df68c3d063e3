"""Top-level pytest configuration: the real control-plane fixtures come from the SDK's plugin."""

pytest_plugins = ["workloadbuilder.testing._pytest"]
