// placeholder: being written (issue 4)
#include <catch2/catch.hpp>
