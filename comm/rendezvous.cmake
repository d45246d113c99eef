# The rendezvous store, launcher-variable rank discovery and restarting in place (std and POSIX only).
add_library(mactor_rendezvous STATIC
  launch_env.cpp
  restart_in_place.cpp
  rendezvous_wire.cpp
  rendezvous_server.cpp
  rendezvous_client.cpp
  rendezvous.cpp)
target_include_directories(mactor_rendezvous PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(mactor_rendezvous PUBLIC Threads::Threads)
