"""The reference async gang scheduler and the simulator, built on the SDK's public API."""
