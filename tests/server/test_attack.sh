#!/usr/bin/env bash
# The short form of `make attack` (scripts/attack.sh --short) on this build:
# the adversarial corpus of tests/attack/ with 8 clients, one round, beside
# control requests; no crash, sanitizer report, 5xx, lost or changed answer,
# or memory over the budget.
set -u
exec scripts/attack.sh --build "$(dirname "${REWIND:-build/rewind}")" --short
