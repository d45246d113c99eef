# Tests of mactor_optim (optimizers, clipping, LR schedule); they call the Python
# reference scripts next to them (torch and megatron-core from .venv).
mactor_add_test(optim_tests
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/optimizer.test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/optimizer_precision.test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/optimizer_grad_clip.test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/lr_scheduler.test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/grad_scaler.test.cpp
  LIBS mactor_optim nlohmann_json::nlohmann_json
  LABELS optim)
