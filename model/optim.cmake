# mactor_optim: optimizers, gradient clipping, loss scaling and the LR/WD scheduler.
# Included from model/CMakeLists.txt; it depends on the tensor layer (the optimizer state counts
# as device memory) and on the kernels' update and reduction entry points, which run wherever the
# parameters are.
add_library(mactor_optim
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_param.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_adam.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_state.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_sgd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/grad_clip.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lr_scheduler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/grad_scaler.cpp)
target_include_directories(mactor_optim PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(mactor_optim PUBLIC mactor_kernels)
# Fused multiply-adds only where written (std::fma), as in the torch kernels we match.
target_compile_options(mactor_optim PRIVATE -ffp-contract=off)
# The update and norm loops vectorize at -O3 once sqrt sets no errno (IEEE sqrt and div, so the
# results do not change).
set_source_files_properties(
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_adam.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_sgd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/grad_clip.cpp
  PROPERTIES COMPILE_OPTIONS "-O3;-fno-math-errno")
