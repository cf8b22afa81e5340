/* The settings of a new communicator: gbConfig_t fields where set, else the
 * GPUBRIDGE_* parameters. Invalid values become "problems" that the start-up
 * exchange reports on every rank. */
#ifndef GB_CORE_SETTINGS_H
#define GB_CORE_SETTINGS_H

#include <stddef.h>
#include "boot/probe.h"
#include "gpubridge/gpubridge.h"
#include "plan/thresholds.h"

/* problems receives "; "-separated texts ("" when all is valid). Policy
 * tuned also reads the thresholds file into *thresholds. realGpu: this
 * rank has a real GPU (the chunk's default, plan/sizes.h). */
void gbCommSettingsResolve(const gbConfig_t* config, int realGpu, gbSettings_t* out, int* blocking,
                           gbThresholds_t* thresholds, char* problems, size_t problemsLen);

/* Checks the config header: gbInvalidArgument when it is not a gbConfig_t. */
gbResult_t gbCommConfigCheck(const gbConfig_t* config);

#endif
