/* A C firmware for QEMU's mps2-an386 (Cortex-M4F) running Ferrite through its C API: the digits
 * model compiled in by `ferrite pack --emit c` (digits.h, digits.c), the held-out images in
 * images.c, the static library libferrite_c.a (the Cortex-M device with its DSP kernels). It
 * classifies every image in a static arena and prints the accuracy over semihosting. */
#include "digits.h"
#include "ferrite.h"
#include "images.h"
#include "semihosting.h"

static _Alignas(16) uint8_t arena[DIGITS_ARENA_BYTES];

static int fail(ferrite_status status) {
    print("error: ");
    print(ferrite_status_message(status));
    print("\n");
    return 1;
}

int main(void) {
    ferrite_model model;
    ferrite_session session;
    ferrite_status status = ferrite_model_load(&model, digits_model, DIGITS_MODEL_BYTES);
    if (status != FERRITE_OK) return fail(status);
    status = ferrite_session_new(&session, &model, arena, sizeof arena);
    if (status != FERRITE_OK) return fail(status);
    unsigned correct = 0;
    for (unsigned i = 0; i < IMAGE_COUNT; i++) {
        float scores[DIGITS_OUTPUT0_BYTES / sizeof(float)];
        status = ferrite_session_set_input(&session, 0, (const uint8_t *)images[i], DIGITS_INPUT0_BYTES);
        if (status == FERRITE_OK) status = ferrite_session_run(&session);
        if (status == FERRITE_OK)
            status = ferrite_session_read_output(&session, 0, (uint8_t *)scores, sizeof scores);
        if (status != FERRITE_OK) return fail(status);
        unsigned best = 0;
        for (unsigned c = 1; c < sizeof scores / sizeof scores[0]; c++)
            if (scores[c] > scores[best]) best = c;
        correct += best == labels[i];
    }
    /* accuracy 0.xxxx (correct of count), in integers: no printf, no C library. */
    unsigned ten_thousandths = (correct * 10000u + IMAGE_COUNT / 2) / IMAGE_COUNT;
    print("accuracy ");
    print_unsigned(ten_thousandths / 10000u);
    print(".");
    print_digits(ten_thousandths % 10000u, 4);
    print(" (");
    print_unsigned(correct);
    print(" of ");
    print_unsigned(IMAGE_COUNT);
    print(")\n");
    return 0;
}
