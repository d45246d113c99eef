#!/usr/bin/env python3
"""cmake/layers.cmake fails the configure on a link the table forbids. It configures small
projects (no compiler: LANGUAGES NONE, interface targets) with the project's own table and
layers.cmake: kernels linking model, training linking CAF (behind a generator expression), and a
target in a folder that is no layer must each stop CMake with an error naming the target, what it
links and the rule; the same project without them must configure.

usage: check_links_fail.py ROOT CMAKE
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

root, cmake = pathlib.Path(sys.argv[1]), sys.argv[2]

TOP = """cmake_minimum_required(VERSION 3.25)
project(layers_probe LANGUAGES NONE)
include(cmake/layers.cmake)
add_library(caf::core INTERFACE IMPORTED)
{subdirs}
mactor_check_layers()
"""
FOLDERS = {
    "tensor": "add_library(mactor_tensor INTERFACE)\n",
    "kernels": "add_library(mactor_kernels INTERFACE)\ntarget_link_libraries(mactor_kernels INTERFACE mactor_tensor)\n",
    "model": "add_library(mactor_model INTERFACE)\ntarget_link_libraries(mactor_model INTERFACE mactor_kernels)\n",
    "training": "add_library(mactor_training INTERFACE)\ntarget_link_libraries(mactor_training INTERFACE mactor_model)\n",
    "actors": "add_library(mactor_actors INTERFACE)\ntarget_link_libraries(mactor_actors INTERFACE mactor_training caf::core)\n",
}
CASES = [
    ("kernels links model", {"kernels": "target_link_libraries(mactor_kernels INTERFACE mactor_model)\n"},
     "mactor_kernels (layer kernels) links mactor_model (layer model), which cmake/layers.txt does not "
     "allow: kernels may use tensor (and itself)."),
    ("training links CAF", {"training": "target_link_libraries(mactor_training INTERFACE $<LINK_ONLY:caf::core>)\n"},
     "mactor_training (layer training) links caf::core (CAF), which cmake/layers.txt lets only actors "
     "bench tests use."),
    ("a target outside the layers", {"scratch": "add_library(scratch_lib INTERFACE)\n"},
     "target scratch_lib is defined in scratch/, which is no layer of cmake/layers.txt"),
]


def configure(extra):
    """Configures the probe project with `extra` appended to folders' CMakeLists.txt."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = pathlib.Path(tmp)
        (tree / "cmake").mkdir()
        for name in ("layers.txt", "layers.cmake"):
            shutil.copy(root / "cmake" / name, tree / "cmake" / name)
        folders = dict(FOLDERS)
        for folder, text in extra.items():
            folders[folder] = folders.get(folder, "") + text
        for folder, text in folders.items():
            (tree / folder).mkdir()
            (tree / folder / "CMakeLists.txt").write_text(text)
        subdirs = "".join(f"add_subdirectory({f})\n" for f in folders)
        (tree / "CMakeLists.txt").write_text(TOP.format(subdirs=subdirs))
        run = subprocess.run([cmake, "-S", str(tree), "-B", str(tree / "build")], capture_output=True, text=True)
        # CMake wraps its error text; join the lines back into one message.
        return run.returncode, " ".join(run.stderr.split())


failures = []
status, err = configure({})
if status != 0:
    failures.append(f"the clean probe project did not configure: {err}")
for name, extra, expected in CASES:
    status, err = configure(extra)
    start = err.find("CMake Error")
    print(f"--- {name}: exit {status}\n{err[start:start + 400] if start >= 0 else err[:400]}")
    if status == 0:
        failures.append(f"{name}: the configure passed")
    if expected not in err:
        failures.append(f"{name}: the error does not say: {expected}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
