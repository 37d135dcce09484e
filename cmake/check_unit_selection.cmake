# ctest's unit_tests_selection (cmake/Dtlab.cmake, dtlab_unit_tests): every case in the unit_tests
# binary must fall under some unit suite's filter. BINARY: the binary; FILTER: the filters of all
# entries, joined by ':'. Lists the cases outside all of them and fails if there is any.
execute_process(COMMAND ${BINARY} --gtest_list_tests "--gtest_filter=-${FILTER}"
                OUTPUT_VARIABLE listed RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${BINARY} --gtest_list_tests failed (${status})")
endif()
string(REGEX MATCHALL "\n  [^\n]+" cases "${listed}")
list(LENGTH cases count)
if(count GREATER 0)
  message(FATAL_ERROR "${count} unit test case(s) run under no ctest entry (no dtlab_unit_suite filter "
                      "selects them; does each TEST start its line?):\n${listed}")
endif()
message(STATUS "every unit test case is selected by one ctest entry")
