#!/bin/sh
# Test rsh agent: "fake_agent.sh HOST COMMAND..." runs COMMAND here, as if on HOST, and tells the
# rank which host it was sent to (MACTOR_TEST_HOST), so several-host layouts run on one machine.
host=$1
shift
MACTOR_TEST_HOST=$host exec "$@"
