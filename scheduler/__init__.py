"""The reference async gang scheduler and the simulator, built on the SDK's public API.

```python
from scheduler import Scheduler, SchedulerConfig

s = Scheduler(cluster, SchedulerConfig(scheduler_name="workloadbuilder-scheduler"))
await s.run()  # or: await s.sync(); await s.schedule_until_idle(); s.next_wakeup()
```
"""

from scheduler._clock import Clock, WallClock
from scheduler._config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from scheduler._leader import LeaderElector
from scheduler._scheduler import Scheduler

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "Clock",
    "LeaderElector",
    "Scheduler",
    "SchedulerConfig",
    "WallClock",
]
