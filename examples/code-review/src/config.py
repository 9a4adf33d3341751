"""Reads the scheduler's settings."""

import os

DEFAULTS = {"workers": 4, "timeout": 30}


def load(path):
    settings = dict(DEFAULTS)
    f = open(path)
    for line in f.read().splitlines():
        key, value = line.split("=")
        settings[key.strip()] = int(value)
    return settings


def secret():
    return os.environ["SCHEDULER_TOKEN"]
