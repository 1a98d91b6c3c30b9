# Writes OUTPUT with ATTN_GIT_REVISION = `git describe --always --dirty` of
# SOURCE_DIR and ATTN_GIT_DIRTY = "yes" or "no" ("unknown" for both outside a
# git checkout, e.g. a source tarball, also one unpacked inside another
# checkout, whose revision is not this tree's); rewritten only when it changes.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --show-toplevel
                OUTPUT_VARIABLE top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
set(revision "unknown")
set(dirty "unknown")
if(NOT failed)
  get_filename_component(top "${top}" REALPATH)
  get_filename_component(source "${SOURCE_DIR}" REALPATH)
  if(top STREQUAL source)
    execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
                    OUTPUT_VARIABLE described OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
    if(NOT failed AND NOT described STREQUAL "")
      set(revision "${described}")
      if(revision MATCHES "-dirty$")
        set(dirty "yes")
      else()
        set(dirty "no")
      endif()
    endif()
  endif()
endif()
set(text "#pragma once\n#define ATTN_GIT_REVISION \"${revision}\"\n#define ATTN_GIT_DIRTY \"${dirty}\"\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()
