# The peer's Python: the virtual environment scripts/install-python-deps makes, with PyTorch 2.x and
# Holistic Trace Analysis from PyPI (docs/build.md). Where it is: $STRATA_VENV, else
# $XDG_CACHE_HOME/strata/venv, else ~/.cache/strata/venv, as the script decides. Looked for at every
# configure (not cached), so a build configured before the environment existed finds it next time.
#   STRATA_VENV_DIR       the environment's directory ("" when there is none)
#   STRATA_PEER_PYTHON    its python, else Debian's /usr/bin/python3 (torch 1.13 where python3-torch is in)
if(DEFINED ENV{STRATA_VENV} AND NOT "$ENV{STRATA_VENV}" STREQUAL "")
  set(_strata_venv "$ENV{STRATA_VENV}")
elseif(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(_strata_venv "$ENV{XDG_CACHE_HOME}/strata/venv")
else()
  set(_strata_venv "$ENV{HOME}/.cache/strata/venv")
endif()
if(EXISTS "${_strata_venv}/bin/python")
  set(STRATA_VENV_DIR "${_strata_venv}")
  set(STRATA_PEER_PYTHON "${_strata_venv}/bin/python")
  message(STATUS "strata: the peer's Python is ${STRATA_PEER_PYTHON} (scripts/install-python-deps)")
else()
  set(STRATA_VENV_DIR "")
  set(STRATA_PEER_PYTHON /usr/bin/python3)
  message(STATUS "strata: no virtual environment at ${_strata_venv} (scripts/install-python-deps makes it): the "
                 "peer is whatever torch /usr/bin/python3 has, and the HTA test skips")
endif()
