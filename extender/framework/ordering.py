"""Job ordering shared by the actions: queues by ``job.queue_order`` (fair share), jobs within a
queue by ``job.order`` (priority, JobQueue priority, share), then by age and name."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from extender.framework.session import Session
from extender.model.job import JobInfo, QueueInfo


def ordered_jobs(ssn: Session, jobs: Iterable[JobInfo]) -> Iterator[JobInfo]:
    """Yield jobs round-robin over queues, always from the queue whose order key is smallest
    *now* (shares move as earlier jobs claim quotas), each queue's jobs in job order."""
    per_queue: dict[str, list[JobInfo]] = {}
    for job in jobs:
        per_queue.setdefault(job.queue, []).append(job)
    order = ssn.stages.order
    for lst in per_queue.values():
        lst.sort(key=lambda j: (order(j), j.created, j.key), reverse=True)  # pop() takes the best
    if len(per_queue) == 1:  # one queue: nothing to choose between (its share is not read)
        (lst,) = per_queue.values()
        while lst:
            yield lst.pop()
        return
    queues = {name: ssn.snap.queues.get(name) or QueueInfo(name) for name in per_queue}
    queue_order = ssn.stages.queue_order
    while per_queue:
        name = min(per_queue, key=lambda q: (queue_order(queues[q]), q))
        lst = per_queue[name]
        yield lst.pop()
        if not lst:
            del per_queue[name]
