# The rendezvous store and launcher-variable rank discovery (std and POSIX sockets only).
add_library(mactor_rendezvous STATIC
  launch_env.cpp
  rendezvous_wire.cpp
  rendezvous_server.cpp
  rendezvous_client.cpp
  rendezvous.cpp)
target_include_directories(mactor_rendezvous PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(mactor_rendezvous PUBLIC Threads::Threads)
