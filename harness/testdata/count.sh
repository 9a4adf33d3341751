#!/bin/sh
# Reads {"text": ...} on stdin and writes {"lines": N}.
wc -l | awk '{print "{\"lines\": " $1 "}"}'
