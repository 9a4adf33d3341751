"""Runs jobs from the queue until it is empty."""

import queue


def run_all(handle):
    done = 0
    while True:
        job = queue.pop()
        if job == None:
            break
        handle(job)
        done += 1
    return done
