"""The reference async gang scheduler, built on the SDK's public API.

```python
from workloadbuilder.scheduler import Scheduler, SchedulerConfig

s = Scheduler(cluster, SchedulerConfig(scheduler_name="workloadbuilder-scheduler"))
await s.run()  # or: await s.sync(); await s.until_idle(); s.next_wakeup()
```

Clocks and leader election live in :mod:`workloadbuilder.runtime`; the plugin set can be
loaded from a ``KubeSchedulerConfiguration`` file with :func:`load_config` (or a parsed
document with :func:`parse_config`), out-of-tree plugins included (their API:
:mod:`workloadbuilder.scheduler.framework`).
"""

from workloadbuilder.scheduler._config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from workloadbuilder.scheduler._profile import ConfigError, LoadedConfig, load_config, parse_config
from workloadbuilder.scheduler._scheduler import Scheduler

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "ConfigError",
    "LoadedConfig",
    "Scheduler",
    "SchedulerConfig",
    "load_config",
    "parse_config",
]
