"""What the tests share: a started server (`server`), the learners' modules
(`learner_modules`), tiny random models (`tiny_models`), the fuzzing and soak
drivers (`fuzzing`, `soak`) and the apps the seam tests run (`apps/`)."""
