// One cell of the weight-stationary systolic array. The next-state function is the per-cell rule
// of sim/systolic_array.h, written once in C++ as sim/mac_cell.h::mac_cell_next(); tests/hw holds
// this module against it register by register, every cycle.
//
// Operands are int8 or uint8 (x_signed, w_signed), widened to 9-bit signed values on entry, so
// the weight registers hold the same values as the C++ model's int16 registers (uint8 255 and
// int8 -128 both fit). The product is 18 bits; the partial sum is int32 and wraps.
// A kSwitch input (x_switch_in) multiplies by the shadow weight and makes it the active weight
// this cycle; a shadow write in the same cycle commits after that copy read the old shadow.
// rst is synchronous and clears every register.
module tpusim_mac_cell (
  input  logic               clk,
  input  logic               rst,
  // from the left: the input and its flags
  input  logic        [7:0]  x_in,
  input  logic               x_signed,
  input  logic               x_valid_in,
  input  logic               x_switch_in,
  // from above: the partial sum (0 for the top row)
  input  logic signed [31:0] psum_in,
  // the shadow weight write (one array row per cycle)
  input  logic               shadow_we,
  input  logic        [7:0]  shadow_in,
  input  logic               w_signed,
  // to the right: the input register
  output logic        [7:0]  x_out,
  output logic               x_signed_out,
  output logic               x_valid_out,
  output logic               x_switch_out,
  // down: the partial-sum register and its valid bit
  output logic signed [31:0] psum_out,
  output logic               psum_valid_out,
  // the weight registers, for inspection (traces, the comparison with the C++ model)
  output logic signed [8:0]  weight_out,
  output logic signed [8:0]  shadow_out
);
  logic signed [8:0]  x_wide, w, shadow_wide;
  logic signed [17:0] product;

  assign x_wide = {x_signed & x_in[7], x_in};
  assign shadow_wide = {w_signed & shadow_in[7], shadow_in};
  assign w = x_switch_in ? shadow_out : weight_out;
  assign product = 18'(w) * 18'(x_wide);

  always_ff @(posedge clk) begin
    if (rst) begin
      x_out <= '0;
      x_signed_out <= 1'b0;
      x_valid_out <= 1'b0;
      x_switch_out <= 1'b0;
      psum_out <= '0;
      psum_valid_out <= 1'b0;
      weight_out <= '0;
      shadow_out <= '0;
    end else begin
      x_out <= x_in;
      x_signed_out <= x_signed;
      x_valid_out <= x_valid_in;
      x_switch_out <= x_switch_in;
      psum_out <= psum_in + 32'(product);
      psum_valid_out <= x_valid_in;
      weight_out <= w;
      if (shadow_we) shadow_out <= shadow_wide;
    end
  end
endmodule
