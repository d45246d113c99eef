#!/bin/sh
# Test rsh agent that behaves like ssh: the words after HOST are joined into one string and
# parsed again by a shell, so a launch command that needs quoting would break here.
host=$1
shift
exec env MACTOR_TEST_HOST="$host" sh -c "$*"
