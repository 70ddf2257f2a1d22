# glove_build_only_source_includes(TARGET SOURCE_DIR)
#
# When the Python environment lives inside the source tree (the project-local .venv of
# scripts/setup.sh), the rosidl Python generator exports numpy's include directory from
# inside the source directory, which CMake forbids in an installed export. Those headers
# are only needed to compile this package, so wrap such paths in $<BUILD_INTERFACE:...>.
#
# Guarded so that it is a no-op in a stock ROS 2 workspace (apt-installed Humble, Jazzy or
# Kilted): there the target may not exist, or it exists without an
# INTERFACE_INCLUDE_DIRECTORIES property; get_target_property then yields
# "<var>-NOTFOUND", which must never be written back (CMake rejects the relative path at
# generate time). test/test_cmake_stock.py configures both cases.
function(glove_build_only_source_includes target source_dir)
  if(NOT TARGET ${target})
    return()
  endif()
  get_target_property(_dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT _dirs)  # unset (-NOTFOUND) or empty: nothing to rewrite
    return()
  endif()
  set(_fixed "")
  set(_changed FALSE)
  foreach(_dir IN LISTS _dirs)
    string(FIND "${_dir}" "${source_dir}/" _pos)
    if(_pos EQUAL 0)
      list(APPEND _fixed "$<BUILD_INTERFACE:${_dir}>")
      set(_changed TRUE)
    else()
      list(APPEND _fixed "${_dir}")
    endif()
  endforeach()
  if(_changed)
    set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_fixed}")
  endif()
endfunction()
