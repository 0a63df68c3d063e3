"""Reference integrations (Job, JobSet, LWS controllers and the pod webhook), built on the SDK."""
