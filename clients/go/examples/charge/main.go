// Charges an order once, however often it runs: the second run replays the stored
// result and charges nothing.
//
//	IDEMD_ADDR=127.0.0.1:50051 IDEMD_TOKEN=idem_... go run ./examples/charge
package main

import (
	"context"
	"fmt"
	"log"

	idemd "github.com/idemd/idemd/clients/go"
)

func main() {
	client, err := idemd.New() // IDEMD_ADDR and IDEMD_TOKEN
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	charge := func(ctx context.Context, attempt *idemd.Attempt) (idemd.Outcome, error) {
		// Call the provider here, with attempt.OperationID as its idempotency key,
		// and stop when ctx is done.
		return idemd.Success{Body: []byte(`{"charge":"ch_1"}`), ContentType: "application/json"}, nil
	}
	result, err := client.ExecuteOnce(context.Background(), "payments.charge", "order-1001",
		idemd.JSON(map[string]any{"amount": 1000, "currency": "EUR"}), charge,
		// After an attempt whose outcome is unknown, charge runs again: safe only
		// because the provider honours attempt.OperationID as its idempotency key.
		// A provider that does not: pass idemd.WithLookup instead.
		idemd.WithProviderDeduplicates())
	if err != nil {
		log.Fatal(err)
	}
	if result.Replayed {
		fmt.Println(string(result.Body), "(replayed)")
	} else {
		fmt.Println(string(result.Body), "(charged)")
	}
}
