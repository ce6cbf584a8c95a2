// Shared by the CPU test suites: assert that a call throws parallax::InvalidArgument naming `argument` and
// stating a rule containing `rule_fragment` (the contract of every public entry point's validation).
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "parallax/core.hpp"

namespace parallax::testing {

template <typename F>
void expect_invalid(F&& f, const std::string& argument, const std::string& rule_fragment) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected InvalidArgument for '" << argument << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(rule_fragment), std::string::npos)
        << "what() = \"" << e.what() << "\" lacks \"" << rule_fragment << "\"";
    EXPECT_NE(std::string(e.what()).find("'" + argument + "'"), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

}  // namespace parallax::testing
