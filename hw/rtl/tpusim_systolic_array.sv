// The matrix unit's ROWS x COLS weight-stationary systolic array, built from tpusim_mac_cell.
// Its ports are SystolicArray::step()'s (sim/systolic_array.h), one clock cycle per step():
//  - left_*[k]: what enters column 0 of row k this cycle, ALREADY skewed (row k sees vector i's
//    element k at cycle t0 + i + k; tpusim_systolic_setup does that from unskewed vectors);
//  - shadow_we, shadow_row, shadow_values[j], shadow_signed: one shadow weight row written this
//    cycle (a tile shifts in over ROWS cycles);
//  - shift_skewed (held for a run; SystolicArray::set_skewed_shift): column j's shadow write
//    passes j delay registers on the top edge (a triangle, like tpusim_systolic_setup's on the
//    left edge), so cell (r, j) is written j cycles after the row was given;
//  - bottom_psum[j], bottom_valid[j]: the bottom row's partial-sum registers, the result the
//    accumulators take in the next cycle.
// psum_all / weight_all / shadow_all / x_all / x_valid_all expose every cell's registers ([k][j])
// for inspection (x_all: the input register widened to 9 bits by its signedness, as
// SystolicArray::x_value gives it).
// any_valid: some cell's x (hence psum) register holds valid data; low means stepping with
// invalid inputs changes nothing observable but delayed shadow writes (SystolicArray::empty() is
// its negation). shift_pending: a delayed shadow write is on its way (SystolicArray::
// shift_pending()).
module tpusim_systolic_array #(
  parameter int ROWS = 4,
  parameter int COLS = 4,
  localparam int RowBits = ROWS > 1 ? $clog2(ROWS) : 1
) (
  input  logic                               clk,
  input  logic                               rst,
  input  logic [ROWS-1:0][7:0]               left_value,
  input  logic [ROWS-1:0]                    left_signed,
  input  logic [ROWS-1:0]                    left_valid,
  input  logic [ROWS-1:0]                    left_switch,
  input  logic                               shadow_we,
  input  logic [RowBits-1:0]                 shadow_row,
  input  logic [COLS-1:0][7:0]               shadow_values,
  input  logic                               shadow_signed,
  input  logic                               shift_skewed,
  output logic [COLS-1:0][31:0]              bottom_psum,
  output logic [COLS-1:0]                    bottom_valid,
  output logic                               any_valid,
  output logic                               shift_pending,
  output logic [31:0]                        psum_all  [ROWS][COLS],
  output logic [8:0]                         weight_all[ROWS][COLS],
  output logic [8:0]                         shadow_all[ROWS][COLS],
  output logic [8:0]                         x_all     [ROWS][COLS],
  output logic                               x_valid_all[ROWS][COLS]
);
  // x moves right: x_*[k][j] enters cell (k, j); column COLS is the last cell's output (unused).
  logic [7:0] x_value [ROWS][COLS+1];
  logic       x_signed[ROWS][COLS+1];
  logic       x_valid [ROWS][COLS+1];
  logic       x_switch[ROWS][COLS+1];
  // psum moves down: psum[k][j] enters cell (k, j); row ROWS is the bottom output.
  logic [31:0] psum      [ROWS+1][COLS];
  logic        psum_valid[ROWS+1][COLS];
  // Every cell's x valid register (which psum_valid equals), flattened for any_valid.
  logic [ROWS*COLS-1:0] cell_valid;
  // The shadow write each column takes this cycle: the given row, or (shift_skewed) the one given
  // j cycles ago, through column j's chain of j delay stages (stage 0 is the input itself).
  logic               col_we    [COLS];
  logic [RowBits-1:0] col_row   [COLS];
  logic [7:0]         col_value [COLS];
  logic               col_signed[COLS];
  // A delayed write in some chain (stages 1 and up), for shift_pending.
  logic [COLS-1:0]    col_pending;

  for (genvar j = 0; j < COLS; ++j) begin : g_shift
    logic               we_d    [j+1];
    logic [RowBits-1:0] row_d   [j+1];
    logic [7:0]         value_d [j+1];
    logic               signed_d[j+1];
    logic [j:0]         we_bits;
    assign we_d[0] = shadow_we;
    assign row_d[0] = shadow_row;
    assign value_d[0] = shadow_values[j];
    assign signed_d[0] = shadow_signed;
    assign we_bits[0] = 1'b0;
    for (genvar d = 1; d <= j; ++d) begin : g_stage
      always_ff @(posedge clk) begin
        if (rst) begin
          we_d[d] <= 1'b0;
          row_d[d] <= '0;
          value_d[d] <= '0;
          signed_d[d] <= 1'b0;
        end else begin
          we_d[d] <= we_d[d-1] && shift_skewed;
          row_d[d] <= row_d[d-1];
          value_d[d] <= value_d[d-1];
          signed_d[d] <= signed_d[d-1];
        end
      end
      assign we_bits[d] = we_d[d];
    end
    assign col_we[j] = shift_skewed ? we_d[j] : shadow_we;
    assign col_row[j] = shift_skewed ? row_d[j] : shadow_row;
    assign col_value[j] = shift_skewed ? value_d[j] : shadow_values[j];
    assign col_signed[j] = shift_skewed ? signed_d[j] : shadow_signed;
    assign col_pending[j] = |we_bits;
  end

  for (genvar k = 0; k < ROWS; ++k) begin : g_row
    assign x_value[k][0] = left_value[k];
    assign x_signed[k][0] = left_signed[k];
    assign x_valid[k][0] = left_valid[k];
    assign x_switch[k][0] = left_switch[k];
    for (genvar j = 0; j < COLS; ++j) begin : g_col
      tpusim_mac_cell u_cell (
        .clk, .rst,
        .x_in(x_value[k][j]), .x_signed(x_signed[k][j]),
        .x_valid_in(x_valid[k][j]), .x_switch_in(x_switch[k][j]),
        .psum_in(psum[k][j]),
        .shadow_we(col_we[j] && col_row[j] == RowBits'(k)),
        .shadow_in(col_value[j]), .w_signed(col_signed[j]),
        .x_out(x_value[k][j+1]), .x_signed_out(x_signed[k][j+1]),
        .x_valid_out(x_valid[k][j+1]), .x_switch_out(x_switch[k][j+1]),
        .psum_out(psum[k+1][j]), .psum_valid_out(psum_valid[k+1][j]),
        .weight_out(weight_all[k][j]), .shadow_out(shadow_all[k][j])
      );
      assign psum_all[k][j] = psum[k+1][j];
      assign cell_valid[k*COLS+j] = x_valid[k][j+1];
      assign x_all[k][j] = {x_signed[k][j+1] & x_value[k][j+1][7], x_value[k][j+1]};
      assign x_valid_all[k][j] = x_valid[k][j+1];
    end
  end

  for (genvar j = 0; j < COLS; ++j) begin : g_edge
    assign psum[0][j] = '0;
    assign psum_valid[0][j] = 1'b0;
    assign bottom_psum[j] = psum[ROWS][j];
    assign bottom_valid[j] = psum_valid[ROWS][j];
  end
  assign any_valid = |cell_valid;
  assign shift_pending = |col_pending;
endmodule
