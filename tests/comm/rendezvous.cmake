# Tests of the rendezvous store and launcher-variable rank discovery.
mactor_add_test(rendezvous_tests
  SOURCES launch_env.test.cpp rendezvous.test.cpp
  LIBS mactor_rendezvous
  LABELS "comm;launcher")
