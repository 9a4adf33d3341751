"""A tiny job queue: push, pop, and a retry helper."""

import time

_jobs = []


def push(job):
    _jobs.append(job)


def pop():
    # Returns None when the queue is empty.
    if len(_jobs) == 0:
        return None
    return _jobs.pop(0)


def retry(fn, attempts=3):
    for i in range(attempts):
        try:
            return fn()
        except Exception:
            time.sleep(2 ** i)
    return fn()
