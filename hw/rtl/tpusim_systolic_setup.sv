// The systolic data setup: row k of an unskewed input vector is delayed by k cycles, so vector i
// enters array row k at cycle t0 + i + k, as tpusim_systolic_array (and SystolicArray::step())
// expect. Row 0 passes straight through; row k is a k-stage delay line of WIDTH bits (a value and
// its flags). rst is synchronous and clears every stage.
module tpusim_systolic_setup #(
  parameter int ROWS = 4,
  parameter int WIDTH = 11
) (
  input  logic                        clk,
  input  logic                        rst,
  input  logic [ROWS-1:0][WIDTH-1:0]  in,
  output logic [ROWS-1:0][WIDTH-1:0]  out
);
  assign out[0] = in[0];
  for (genvar k = 1; k < ROWS; ++k) begin : g_row
    logic [WIDTH-1:0] stage[k];  // stage[0] is the newest
    always_ff @(posedge clk) begin
      if (rst) begin
        for (int s = 0; s < k; ++s) stage[s] <= '0;
      end else begin
        stage[0] <= in[k];
        for (int s = 1; s < k; ++s) stage[s] <= stage[s-1];
      end
    end
    assign out[k] = stage[k-1];
  end
endmodule
